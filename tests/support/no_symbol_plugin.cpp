// A shared library that is not a schedule plugin: no ppstage_register_schedules.
extern "C" int not_a_schedule_plugin() { return 42; }
