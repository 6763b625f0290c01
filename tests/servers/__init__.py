"""Real HTTP servers that tests talk to (fault injection peers for clients under test)."""
