require "extracttext";
require "foreverypart";

foreverypart {
	extracttext "frop";
}
