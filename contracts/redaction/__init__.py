"""Redaction: secrets and personal data taken out of free text before it is stored
(rules.py: the detectors; text.py: text and JSON values; decisions.py: a decision's
free-text fields; letters.py: a dead letter's payload)."""
