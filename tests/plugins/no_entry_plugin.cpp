// A shared library that is not an Amphora plugin: it exports no entry point.
extern "C" int not_a_plugin() { return 7; }
