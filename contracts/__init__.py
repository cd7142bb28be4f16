"""Pure domain contracts: models, rules, lifecycles. Nothing here does I/O."""
