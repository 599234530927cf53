"""Pure types and rules: records, instants and windows, search requests, errors. No I/O."""
