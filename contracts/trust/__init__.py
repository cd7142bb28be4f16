"""Who may do what: principals, their keys, and the checks on what they sign."""
