"""An agent module for the bad-input corpus: it defines `respond`, not the function named."""


def respond(conversation, tools):
    return "Hello"
