require "enotify";

notify "mailto:user1@example.com";
notify "mailto:user2@example.com";
notify "mailto:user3@example.com";
notify "mailto:user4@example.com";
notify "mailto:user5@example.com";
notify "mailto:user6@example.com";
