"""The composition root: the settings (bootstrap.settings) and `open_ledger`
(bootstrap.ledger), which the workers, the web console and the CLI each call once."""
