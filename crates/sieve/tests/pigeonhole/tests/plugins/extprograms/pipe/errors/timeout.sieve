require "vnd.dovecot.pipe";

pipe "sleep10";
