require "imap4flags";

setflag "$label1 \\answered";
