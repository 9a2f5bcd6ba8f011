"""Curated knowledge memory: the parts behind `memory.service.MemoryService`.

service.py   the use case: remember, recall, the curation worker and the vector backfill
inputs.py    argument checks for remember / recall (UserInputError naming the fix)
policy.py    pure decisions: thresholds, duplicates, the rules a chat answer must obey
prompt.py    the curation prompt, its JSON schema, and parsing the model's answer
queue.py     the durable remember_queue (its SQL: index/memory_sql.py and the engines')
records.py   applying a decision to memories, FTS rows, vectors and the log, in one transaction
curator.py   one queue item: embed -> neighbours -> decide -> apply in one transaction
recall.py    hybrid search over memories, with history and mix.lock staleness
"""
