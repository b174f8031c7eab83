require "vnd.dovecot.pipe";

pipe "unknown";
