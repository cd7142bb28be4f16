"""Client libraries: for agents (record decisions), operators (corrections), subscribers."""
