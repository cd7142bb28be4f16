"""What a revert archives, what it skips and why: pure rules, manifest lines, dry-run preview."""
