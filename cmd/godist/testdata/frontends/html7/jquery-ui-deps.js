// jQuery UI's slider's dependencies, each after the ones it needs (see jquery-global.js).
import 'jquery-ui/ui/version';
import 'jquery-ui/ui/widget';
import 'jquery-ui/ui/keycode';
import 'jquery-ui/ui/widgets/mouse';
