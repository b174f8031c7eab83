require "enotify";

# 1: Invalid url scheme
notify "snailto:stephan@example.org";

