"""KRaft-style Raft for the metadata log: a sans-IO core (no trio, no sockets, time passed in)."""
