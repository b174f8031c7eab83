require "enotify";

notify "mailto:user@example.com";
