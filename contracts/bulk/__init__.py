"""Bulk corrections: one correction per decision a search filter matches, as a batch.

The batch model and its lifecycle (`states`, `model`), the conflict rule and the
aggregate of the matches' impacts (`preview`), and the batch's progress as its
corrections' own states say it (`progress`). Pure: no I/O."""
