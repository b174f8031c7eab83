require "vnd.dovecot.pipe";

pipe :args "aaaa
	aaaa" "frop";

