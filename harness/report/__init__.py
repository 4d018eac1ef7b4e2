"""Reports of runs: terminal tables now; Markdown, HTML and JUnit as the gate needs them."""
