"""The pure core: plain typed data in, decisions out. No I/O, no wall clock."""
