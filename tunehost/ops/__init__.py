"""Operations: each takes the host (or its facts) and the store from the CLI and returns a typed result; none prints."""
