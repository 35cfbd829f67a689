"""The REPL: the chat session, slash commands, review of the queue, and the UI seam (ui/)."""
