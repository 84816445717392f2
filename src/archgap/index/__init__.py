"""Package indexes and remote wheels: which wheel a requirement means, and its bytes."""
