"""Cluster metadata: metadata records, the MetadataImage they build, and the QuorumController
that turns requests into records (plain state machine; the server proposes its records to Raft)."""
