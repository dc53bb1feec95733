"""Cluster mode glue: peer connections, the Raft driver, the active controller, replica fetchers."""
