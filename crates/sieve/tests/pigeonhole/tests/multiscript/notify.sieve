require "enotify";

notify "mailto:stephan@example.org";
