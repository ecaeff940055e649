"""Speed figures; each module prints them (``--json``: one JSON object)."""
