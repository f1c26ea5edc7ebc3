"""The control plane of the lab's own services (the chaos proxy, the reference broker): a JSON
HTTP API on loopback, its client, and the log of every fault applied."""
