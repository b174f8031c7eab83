require "vnd.dovecot.filter";

filter "unknown";
