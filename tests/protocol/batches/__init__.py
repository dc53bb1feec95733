"""Record batches captured from real client libraries, with the scripts that re-capture them."""
