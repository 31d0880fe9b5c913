"""Read models of the operators' console: every SQL the console runs, over rollups wherever they suffice."""
