"""Reading traces back: episodes recorded by the harness, and (later) production traces."""
