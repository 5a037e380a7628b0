"""The server bench: a llama-server measured over HTTP (rounds), its bounded client, the --serve launcher, its CPU use."""
