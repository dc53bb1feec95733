"""Leader-side replication bookkeeping: high watermark and ISR decisions (pure, time passed in)."""
