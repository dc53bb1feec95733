from kafkapy.cli.main import main

raise SystemExit(main())
