keep;
# Final comment without newline
