require "foreverypart";
require "include";

foreverypart {
	include "include-loop-5";
}
