"""The shapes of text written to steer an AI agent, as regular expressions.

Each rule names one shape seen in published prompt-injection reports (the cases with their
sources are in examples/steering/injections.jsonl). A rule matches text *addressed to a
model*, never a programmer's instruction: Elixir docs say "you should always call X",
"ignore the return value" and "do not use this function" on every page, and none of those
match. What matches:

* `role_marker`: the syntax of a chat template (`<|im_start|>`, `[INST]`, `<<SYS>>`,
  `### System:`, `<system>`, `<IMPORTANT>`, a fake `Assistant:` turn);
* `override`: "ignore (all) previous instructions" and its family, "your new task is",
  "developer mode";
* `address`: words to an AI ("if you are an LLM", "note for the assistant:", "AI agents
  reading this must");
* `concealment`: keeping something from the user ("do not tell the user", "this could
  upset the user", "silently run");
* `exfiltration`: reading credentials or sending data out (`~/.ssh/id_rsa`, `mcp.json`
  passed along, `printenv | curl`, a markdown image whose URL waits for data);
* `tool_coercion`: directions about tool calls and commands ("before using this tool",
  "offer to run the command for them", "relay this to the user").

`DIRECTIVE` is weaker: any order to a reader ("run", "you must", "do not"). It counts only
inside hidden markup, where no reader is meant to see it (see markup.py).

Every quantifier is bounded or runs over a character class, so matching is linear in the
text; each rule's regex runs only when one of its trigger words occurs in the text.
"""

from __future__ import annotations

import re

from attrs import frozen

ROLE_MARKER = "role_marker"
OVERRIDE = "override"
ADDRESS = "address"
CONCEALMENT = "concealment"
EXFILTRATION = "exfiltration"
TOOL_COERCION = "tool_coercion"

# Who a text steering an agent names: an AI by kind or by product name. Bare "agent",
# "model" and "bot" are Elixir words (Agent, Ecto models), so they count only where the
# sentence can address nobody else.
_AI = (
    r"(?:\bAI\b|\bA\.I\.|\bLLMs?\b|(?i:\blarge\s+language\s+models?\b|\blanguage\s+models?\b"
    r"|\bchat\s?bots?\b|\bChatGPT\b|\bClaude\b|\bGPT-?\d[\w.]*|\bCopilot\b|\bGemini\b"
    r"|\bCodex\b|\bCursor\s+(?:agent|AI)\b))"
)
_PERSONA = (
    rf"(?:{_AI}(?:\s+(?i:agents?|assistants?|models?|systems?|bots?|crawlers?|tools?)\b)?"
    r"|(?i:\b(?:coding|autonomous|automated)\s+(?:agents?|assistants?|systems?|tools?)\b"
    r"|\bassistants?\b))"
)
_AGENTS = (
    r"(?:(?:\bAI|\bLLM|(?i:\bcoding|\bautonomous|\bautomated))\s+(?i:agents?|assistants?"
    r"|models?)\b|\bLLMs\b|(?i:\blanguage\s+models\b))"
)
_BARE = r"(?i:agents?|models?|bots?)"
_CONFIG_FILE = r"(?:\bmcp\.json\b|~/\.cursor\b|~/\.claude\b|\.config/gh\b)"
_SECRET_FILE = (
    r"(?:~/\.ssh\b|\.ssh/|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.git-credentials"
    r"|\.kube/config|\.docker/config\.json|/etc/shadow|\.(?:bash|zsh)_history)"
)
_SECRET = (
    r"(?:secrets?|credentials|api[_\s-]?keys?|private\s+keys?|ssh\s+keys?|passwords|access\s+"
    r"tokens?|tokens|env(?:ironment)?\s+variables|cookies|conversation|chat\s+history"
    r"|system\s+prompt)"
)


@frozen
class Rule:
    """One shape: a pattern, run only when the text holds a word of every trigger group."""

    name: str
    triggers: tuple[tuple[str, ...], ...]  # lowercase words; "=Word" is matched as written
    pattern: re.Pattern[str]

    def search(
        self, text: str, lowered: str, seen: dict[tuple[str, ...], bool]
    ) -> re.Match[str] | None:
        """The first match in `text`; `seen` caches trigger groups across rules."""
        for group in self.triggers:
            hit = seen.get(group)
            if hit is None:
                hit = seen[group] = any(
                    w[1:] in text if w[0] == "=" else w in lowered for w in group
                )
            if not hit:
                return None
        return self.pattern.search(text)


def _rule(name: str, triggers: str, pattern: str) -> Rule:
    """`triggers`: groups separated by ";", the words of a group by spaces."""
    groups = tuple(tuple(group.split()) for group in triggers.split(";"))
    return Rule(name, groups, re.compile(pattern))


# Words that name an AI, for the triggers of rules that need one ("=AI" as written).
_NAMES = (
    "=AI =A.I. llm language chatbot chat bot chatgpt claude gpt copilot gemini codex cursor "
    "assistant coding autonomous automated"
)
_USERS = "user's user\u2019s users"

RULES: tuple[Rule, ...] = (
    # -- role markers
    _rule(
        ROLE_MARKER,
        "<| [inst] [/inst] <<sys>> <</sys>> _of_turn>",
        r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|start_header_id"
        r"|end_header_id|eot_id|begin_of_text)\|>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>",
    ),
    _rule(
        ROLE_MARKER,
        "system assistant instruction human; :",
        r"(?m:^[ \t>]*\#{1,6}[ \t]*(?i:system|assistant|instructions?|human)[ \t]*:)"
        r"|(?m:^[ \t>]*(?:SYSTEM|ASSISTANT|Assistant|Human)[ \t]*:)",
    ),
    _rule(
        ROLE_MARKER,
        "<system> </system> <system_prompt> <system-prompt> <sys> </sys> <instructions> "
        "</instructions> <user_instructions> <user-instructions> <important> </important> "
        "<admin> </admin> [system]( [assistant](",
        r"</?(?i:system|system[_-]prompt|sys|instructions|user[_-]instructions|important"
        r"|admin)>|\[(?i:system|assistant)\]\(\#",
    ),
    # -- overrides
    _rule(
        OVERRIDE,
        "ignore disregard forget override bypass abandon; instruction prompt directive "
        "direction guideline guardrail rule constraint command programming",
        r"(?i:\b(?:ignore|disregard|forget|override|bypass|abandon)\s+(?:(?:all|any|each"
        r"|every|the|your|my|of|these|those)\s+){0,3}(?:previous|prior|above|earlier"
        r"|preceding|former|foregoing|original|initial|system|safety|other|old)\s+(?:\w+\s+)?"
        r"(?:instructions?|prompts?|directives?|directions|guidelines|guardrails|rules"
        r"|constraints|commands)\b"
        r"|\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|the|your|these"
        r"|those|of)\s+){0,3}(?:instructions|prompts?|system\s+prompt|guardrails|directives"
        r"|programming)\b)",
    ),
    _rule(
        OVERRIDE,
        "ignore disregard forget; all everything anything",
        r"(?i:\b(?:ignore|disregard|forget)\s+(?:all|everything|anything)\s+(?:you\s+(?:were"
        r"|have\s+been)\s+told|above|before|prior|previously|said\s+(?:above|before))\b)",
    ),
    _rule(
        OVERRIDE,
        "instructions; :",
        r"(?i:\b(?:new|updated|revised|real|actual|true)\s+instructions\s*:)",
    ),
    _rule(
        OVERRIDE,
        "your; new real actual true only primary; task goal instruction objective job "
        "mission purpose",
        r"(?i:\byour\s+(?:new|real|actual|true|only|primary)\s+(?:task|goal|instructions?"
        r"|objective|job|mission|purpose)\s+(?:is|are|will\s+be)\b)",
    ),
    _rule(
        OVERRIDE,
        "mode; dan developer god jailbr unrestricted unfiltered admin sudo",
        r"(?i:\b(?:you\s+are\s+now\s+(?:in\s+)?|enter\s+|enable\s+|activate\s+|switch\s+to\s+)"
        r"(?:DAN|developer|god|jailbreak|jailbroken|unrestricted|unfiltered|admin|sudo)\s+"
        r"mode\b)",
    ),
    _rule(
        OVERRIDE,
        "stop what you; stop your current",
        r"(?i:\bstop\s+(?:what\s+you\s+are\s+doing|your\s+current\s+task)\b)",
    ),
    # -- words addressed to an AI
    _rule(
        ADDRESS,
        "you; if when case",
        rf"(?i:\b(?:if|when|whenever|in\s+case)\s+you(?:'re|\s+are)\s+(?:an?\s+|the\s+)?)"
        rf"(?:{_PERSONA}|{_BARE}\b)",
    ),
    _rule(
        ADDRESS,
        f"{_NAMES}; note notice message background context instruction reminder attention "
        "important hint directive info",
        rf"(?i:\b(?:note|notice|message|background|context|instructions?|reminder|attention"
        rf"|important|hint|directive|info|information)\s+(?:to|for)\s+(?:the\s+|all\s+|any\s+"
        rf"|every\s+)?){_PERSONA}",
    ),
    _rule(
        ADDRESS,
        "agent model bot; note notice background instruction reminder attention hint",
        rf"(?i:\b(?:note|notice|background|instructions?|reminder|attention|hint)\s+(?:to|for)"
        rf"\s+(?:the\s+|all\s+|any\s+)?){_BARE}\s*[:\u2014-]",
    ),
    _rule(
        ADDRESS,
        f"for; {_NAMES}",
        rf"(?i:\bfor\s+(?:all\s+|any\s+)?){_PERSONA}\s*[:\u2014]",
    ),
    _rule(
        ADDRESS,
        f"dear hey hi hello attention greetings; {_NAMES}",
        rf"(?i:\b(?:dear|hey|hi|hello|attention|greetings)\s*,?\s+){_PERSONA}",
    ),
    _rule(
        ADDRESS,
        f"{_NAMES}; reading processing parsing summari scanning indexing crawling browsing that",
        rf"{_PERSONA}\s*,?\s+(?i:reading|processing|parsing|summari[sz]ing|scanning|indexing"
        rf"|crawling|browsing|that\s+(?:reads?|process(?:es)?|sees?|index(?:es)?|crawls?"
        rf"|summari[sz]es?))\s+(?i:this|these|the\s+following|it)\b",
    ),
    _rule(
        ADDRESS,
        "=AI llm coding autonomous automated language; must should shall need have to "
        "required instructed expected asked",
        rf"{_AGENTS}\s*(?:[,:]\s*)?(?i:must|should|shall|need\s+to|have\s+to|are\s+"
        rf"(?:required|instructed|expected|asked)\s+to)\b",
    ),
    _rule(
        ADDRESS,
        "as a; =AI llm language",
        r"(?i:\bas\s+an?\s+)(?:\bAI\b|\bLLM\b|(?i:(?:large\s+)?language\s+model\b))",
    ),
    _rule(
        ADDRESS,
        "this; directed addressed meant intended written",
        rf"(?i:\bthis\s+(?:message|note|section|text|instruction|request)\s+is\s+(?:directed"
        rf"|addressed|meant|intended|written)\s+(?:at|to|for)\s+(?:the\s+|any\s+)?)"
        rf"(?:{_PERSONA}|{_BARE}\b)",
    ),
    # -- concealment
    _rule(
        CONCEALMENT,
        "user human; not don't never without",
        r"(?i:\b(?:do\s+not|don't|never|without)\s+(?:tell|telling|inform|informing|notify"
        r"|notifying|alert|alerting|mention|mentioning|warn|warning)\s+(?:(?:this|it|anything)"
        r"\s+(?:to\s+)?)?(?:the\s+)?(?:user|human)s?\b"
        r"|\b(?:the\s+)?(?:user|human)\s+(?:must|should|need|needs|does)\s*(?:n't|\s+not)"
        r"\s+(?:know|see|notice|find\s+out|be\s+(?:told|informed|aware|alerted))\b)",
    ),
    _rule(
        CONCEALMENT,
        "user human; keep hide upset alarm scare worry frighten",
        r"(?i:\b(?:keep|hide)\s+(?:this|these|it|them)\s+(?:\w+\s+)?from\s+the\s+(?:user"
        r"|human)\b|\b(?:upset|alarm|scare|worry|frighten)\s+the\s+user\b)",
    ),
    _rule(
        CONCEALMENT,
        "mention reveal disclose repeat show acknowledge; not don't never",
        r"(?i:\b(?:do\s+not|don't|never)\s+(?:mention|reveal|disclose|repeat|show|acknowledge)"
        r"\s+(?:that\s+you\b|these\s+(?:instructions|steps)\b|this\s+(?:instruction|step|note"
        r"|message|request)\b|the\s+(?:above|following)\s+(?:instructions?|steps?)\b))",
    ),
    _rule(
        CONCEALMENT,
        "silently quietly secretly covertly discreetly",
        r"(?i:\b(?:silently|quietly|secretly|covertly|discreetly)\s+(?:run|execute|send|upload"
        r"|read|collect|install|include|add|append|exfiltrate|forward|post|call|invoke)\b)",
    ),
    # -- credentials read, data sent out
    _rule(
        EXFILTRATION,
        ".ssh id_rsa id_ed25519 id_ecdsa id_dsa .aws/ git-credentials .kube/ .docker/ "
        "/etc/shadow _history",
        rf"(?i:\b(?:read|cat|open|send|upload|post|include|print|output|copy|attach|pass"
        rf"|leak|exfiltrate|dump|paste|share|forward|email|collect|extract|steal|base64"
        rf"|encode)\b[^\n]{{0,80}}?){_SECRET_FILE}",
    ),
    _rule(
        EXFILTRATION,
        "mcp.json ~/.cursor ~/.claude .config/gh",
        rf"(?i:\b(?:read|cat)\b[^\n]{{0,60}}?){_CONFIG_FILE}(?i:[^\n]{{0,80}}?\b(?:pass|send"
        rf"|include|append|post|upload|attach)\b)",
    ),
    _rule(
        EXFILTRATION,
        "send post upload exfiltrate forward transmit leak email submit curl wget; "
        "secret credential key password token env cookie conversation history prompt; "
        "http @ webhook",
        rf"(?i:\b(?:send|post|upload|exfiltrate|forward|transmit|leak|email|submit|curl|wget)"
        rf"\b[^\n]{{0,80}}?\b{_SECRET}\b[^\n]{{0,80}}?(?:https?://|\b[\w.+-]+@[\w-]+\.\w"
        rf"|webhook))",
    ),
    _rule(
        EXFILTRATION,
        "env; |",
        r"(?i:(?:\bprintenv\b|\benv\b|\$\(env\))\s*\|\s*(?:curl|nc|ncat|wget|base64)\b)",
    ),
    _rule(
        EXFILTRATION,
        "curl; $(",
        r"(?i:\bcurl\b[^\n]{0,200}?\$\((?:printenv|env|cat\s)[^\n)]{0,100}\))",
    ),
    _rule(
        EXFILTRATION,
        "](http; { < $ %7b =[",
        r"\]\(\s*https?://[^)\s]{1,300}?[?&][\w-]{1,40}=(?:\{|%7[Bb]|<|\[|\$)[^)\s]{0,200}\)"
        r"|!\[[^\]\n]{0,200}\]\(\s*https?://[^)\s]{1,300}?(?:\{|%7[Bb]|<|\[|\$)[^)\s]{0,200}\)",
    ),
    _rule(
        EXFILTRATION,
        _USERS,
        r"(?i:\b(?:access|read|scan|search|collect|list|dump|copy|send|upload|exfiltrate"
        r"|modify|delete)\s+(?:\w+\s+){0,3}?the\s+users?['\u2019]?s?\s+(?:system|machine|shell"
        r"|terminal|file\s?system|ssh\s+keys?|api\s+keys?|secrets|clipboard|environment\s+"
        r"variables|private\s+(?:repos|repositories|files|data))\b)",
    ),
    # -- directions for commands and tool calls
    _rule(
        TOOL_COERCION,
        "tool",
        r"(?i:\bbefore\s+(?:using|calling|invoking|running)\s+(?:this|any\s+(?:other\s+)?)"
        r"\s*tools?\b|\b(?:otherwise|or\s+else)\s+the\s+tool\s+(?:will\s+not|won't|cannot"
        r"|can't|will\s+fail)\b|\b(?:when|if|whenever)\s+(?:this|the)\s+tool\s+is\s+"
        r"(?:available|present|loaded)\b)",
    ),
    _rule(
        TOOL_COERCION,
        "pass; content",
        r"(?i:\bpass\s+(?:its|their|the\s+file's)\s+(?:content|contents)\s+as\b)",
    ),
    _rule(
        TOOL_COERCION,
        "offer permission approval confirmation; run execute install",
        r"(?i:\boffer\s+to\s+(?:run|execute|install)\s+(?:it|this|that|the)\b[^\n]{0,40}?"
        r"(?:for\s+(?:them|the\s+user)|on\s+(?:their|the\s+user'?s)\s+behalf)"
        r"|\bwith\s+(?:their|the\s+user'?s)\s+(?:permission|approval|confirmation),?\s+"
        r"(?:you\s+)?(?:may|can|should)\s+(?:run|execute|install)\b)",
    ),
    _rule(
        TOOL_COERCION,
        "relay surface convey pass along pass on; user",
        r"(?i:\b(?:relay|surface|convey|pass\s+(?:along|on))\s+(?:this|these|it|the\s+"
        r"(?:following|above|notice|message|section|note)(?:\s+\w+)?)\s+to\s+(?:the\s+)?user)",
    ),
)

# An order to whoever reads: counted only in markup no reader is meant to see. A verb
# followed by "(" or "=" is code (a commented-out `print(...)`), not an order.
DIRECTIVE = re.compile(
    r"(?i:\b(?:you|the\s+(?:agent|assistant|model|ai|bot))\s+(?:must|should|shall|need\s+to"
    r"|have\s+to|are\s+(?:required|expected|instructed|asked)\s+to|are\s+to|will\s+now)\b)"
    r"|(?im:(?:^[ \t]*|[.!?:;]\s+|^[ \t]*[-*][ \t]+)(?:please\s+)?(?:run|execute|call|invoke|read"
    r"|send|post|fetch|open|visit|navigate|download|install|print|output|reply|respond"
    r"|answer|say|tell|reveal|mention|include|insert|append|write|delete|remove|replace"
    r"|ignore|disregard|forget|pretend|act\s+as|follow|summari[sz]e|recommend|always|never"
    r"|push|commit|merge|approve|disable|grant|upload|paste|copy|use|set|update|create|skip"
    r"|do\s+not|don't|make\s+sure|be\s+sure|remember)[ \t]+[^\s(=])"
)
