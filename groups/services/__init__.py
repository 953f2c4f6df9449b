"""All writes: one poll's changes, remediation jobs, audit rows, tokens, known-partition sets."""
