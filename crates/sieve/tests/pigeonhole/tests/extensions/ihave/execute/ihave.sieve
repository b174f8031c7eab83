require "ihave";

if ihave "nonsense-extension" {
	nonsense_command "Frop!";
}

redirect "frop@example.com";
