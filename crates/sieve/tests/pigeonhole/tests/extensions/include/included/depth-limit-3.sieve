keep;
