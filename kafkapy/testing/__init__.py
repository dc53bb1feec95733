"""Test support shipped with kafkapy (cluster harness); production code never imports it."""
