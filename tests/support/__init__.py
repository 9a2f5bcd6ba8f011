"""What tests share: builders, pytest plugins (fixtures), harnesses and the waiting helper.

Test modules import from here and from tests/fakes/ (the loopback stand-ins for remote
services), never from one another. tests/README.md has the layout.
"""
