// libringsync_client.so holds ringsync_client whole (see client/python/CMakeLists.txt);
// this file only gives the shared library target a source of its own.
