"""What the node must reach: threshold profiles, their schema, loading and matching to hardware."""
