"""Protocol-level client: crafted Produce requests for the raw scenarios."""
