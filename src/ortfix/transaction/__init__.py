"""Plan → transaction: apply as one journaled, confined, verified transaction; roll back; prune."""
