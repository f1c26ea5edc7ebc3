"""`make soak`: reliability figures for the lab's own servers under malformed input and crashes."""
